package acme.guards

redact contains "/token" if input.tool.name == "login"
