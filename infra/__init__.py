"""The CDK app's constructs: one per concern, composed by `stack.py`."""
