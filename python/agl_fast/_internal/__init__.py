"""Infrastructure shared by the package's modules (not a public API).

* :mod:`.args`: typed parameter checks that raise the package's errors.
* :mod:`.batch`: one clip or a batch in, the matching layout out.
* :mod:`.config`: the thread-count setting.
* :mod:`.onnx`: the one ONNX Runtime session factory.

Any module of ``agl_fast`` may import from here; nothing outside the package
should.
"""
