"""A shared test-case factory: each bad-input case asserts the exception type and the message fragments."""

from absl.testing import parameterized


def bad_input_test_case(cases):
  """Returns a TestCase class with one test per (name, call, exception type, message fragments) case."""

  class BadInputTest(parameterized.TestCase):
    @parameterized.named_parameters(cases)
    def test_error_names_the_argument(self, call, exc_type, fragments):
      with self.assertRaises(exc_type) as ctx:
        call()
      message = str(ctx.exception)
      for fragment in fragments:
        self.assertIn(fragment, message)

  return BadInputTest
