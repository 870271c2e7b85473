"""What every job stands on, below the data: how its options declare their flags
(`option_fields`) and SIGTERM as an exception for the work a stop may cut short (`signals`).
Neither loads TensorFlow: the data jobs use both without it."""
