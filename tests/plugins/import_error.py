"""A plugin whose import fails."""

raise ImportError("fixture plugin cannot be imported")
