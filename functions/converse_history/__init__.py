"""The converse-history Lambda: record, cap, window, attach the fold, trigger compaction."""
