"""The compactor Lambda: folds a conversation's unfolded turns into its memory."""
