"""The agent's pure core (#48): what its tools are (tools.py), how a model's answer becomes one
validated action whatever way the model answers (actions.py), and when a turn is stuck and must
stop (stuck.py). The service that runs the loop, the doors (LSP, terminal) and the confirmations
live outside core, over these."""
