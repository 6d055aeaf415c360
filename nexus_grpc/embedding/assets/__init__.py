"""Data files shipped with the embedder (tokenizer.json; see NOTICE.txt)."""
