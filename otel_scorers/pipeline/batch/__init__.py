"""The batch lane: judgements at the batch price, emitted late (:mod:`.lane`, built by
:mod:`.build` from the ``batch`` settings)."""
