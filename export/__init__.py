"""``tutorrl export``: a bundle as another launcher's job (KubeRay, SkyPilot, Slurm)."""
