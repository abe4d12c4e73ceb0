"""Test doubles at the project's seams (a fake pynvml module)."""
