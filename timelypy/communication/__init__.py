"""Moving records and progress between workers: allocators, codecs, configuration."""
