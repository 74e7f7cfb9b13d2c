"""_wire"""
