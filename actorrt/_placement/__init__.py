"""_placement"""
