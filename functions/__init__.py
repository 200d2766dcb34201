"""What deploys: the Cloud Functions entry points and the agents' handler modules."""
