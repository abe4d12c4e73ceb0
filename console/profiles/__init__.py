"""Server profiles: pydantic models, the TOML loader, and launch commands built from them."""
