"""Push notifications: webhook registrations, their delivery with retries, and the SSRF guard
on the URLs callers register."""
