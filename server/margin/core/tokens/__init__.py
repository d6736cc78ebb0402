"""Token counting: which tokenizer a profile uses, and the counters themselves."""
