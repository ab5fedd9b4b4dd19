"""memtrial's reference memory system: one SQLite store with FTS5, embeddings and an entity graph."""
