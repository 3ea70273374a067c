"""`pallas-prof show --target`: a saved kernel compiled for the GPUs it is deployed on."""
