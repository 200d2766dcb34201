"""Wire dialects: A2A v1.0, v0.3 and v0.1 (with the seeds' informal forms) to and from the
canonical model and requests. Decoding is lenient and shared (`decode`); encoding is exact
per version."""
