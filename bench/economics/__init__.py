"""Context economics: toolkeep and published policies, priced with prompt caching counted."""
