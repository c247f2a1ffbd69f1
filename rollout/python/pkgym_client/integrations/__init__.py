"""Trainer integrations: `trl` (a rollout_func for GRPOTrainer) and `verl` (a multi-turn
BaseInteraction). Each imports its trainer only when used; see docs/integrations.md."""
