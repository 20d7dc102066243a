"""The corpus-size curve of Gramian estimation (issue 18): SOGram, sampling, the exact oracle and sampled softmax
against n."""
