"""Lambda entry points: parse the event, call the logic once, return a small result."""
