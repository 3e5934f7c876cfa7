"""Lambda entry points: parse the event, call the function's service once, return a small result."""
