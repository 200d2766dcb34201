"""Task store adapters: in memory (embedded backend) and Firestore (production)."""
