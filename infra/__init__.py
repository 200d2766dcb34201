"""What `make deploy` creates in Google Cloud, and the commands that create, check and remove it."""
