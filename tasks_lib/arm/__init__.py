"""One arm of the paired matrix: workspace, memory, agent, audit, check, record."""
