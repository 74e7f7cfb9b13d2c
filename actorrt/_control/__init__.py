"""_control"""
