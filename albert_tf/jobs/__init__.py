"""What every job stands on, below the data: how its options declare their flags
(`option_fields`), SIGTERM as an exception for the work a stop may cut short (`signals`) and
TF Serving's numbered version folders that a job exports into (`versions`). None loads
TensorFlow: the data jobs use them without it."""
