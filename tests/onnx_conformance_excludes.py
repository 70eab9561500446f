EXCLUDES: dict[str, str] = {}
