"""Bounds over every plan (lower bounds on the serial time of any valid plan, in any order)."""
