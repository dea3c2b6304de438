"""Run reports: JSONL event streams turned into self-contained HTML pages (``report``)."""
