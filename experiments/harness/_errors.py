"""The harness's usage errors: a bad flag value (exit 2, with the usage text) or missing input data (exit 2, in one
line)."""


class UsageError(ValueError):
  """A bad flag value: ``flag`` names it, the message says what is allowed."""

  def __init__(self, flag: str, message: str):
    super().__init__(f"{flag} {message}")
    self.flag = flag


class InputError(UsageError):
  """A flag whose syntax is right but whose data is not there or not usable (a missing path): reported in one
  line, as the loaders' data errors are, without the usage text (which would not help)."""
