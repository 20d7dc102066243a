"""bcjax experiments: one package per paper table or figure, each runnable with ``python -m experiments.<name>``."""
