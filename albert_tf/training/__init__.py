"""The one training loop every task runs on (`loop`), its options, recovery after faults,
preemption, optimization (LAMB, AdamW, layer-wise decay), strategies and precision."""
