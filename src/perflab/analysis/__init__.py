"""What results mean: robust statistics, disturbance rules and the figure style."""
