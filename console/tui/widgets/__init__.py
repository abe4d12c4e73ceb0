"""Widgets of the console: they only render what they are given."""
