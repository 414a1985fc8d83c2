"""The Hub edge: refs, trees and files over huggingface_hub's HTTP client, limits and throttling."""
