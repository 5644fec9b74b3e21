"""Infrastructure shared by the package's modules (not a public API).

* :mod:`.args`: typed parameter checks that raise the package's errors.
* :mod:`.batch`: one clip or a batch in, the matching layout out.
* :mod:`.config`: the thread-count setting.
* :mod:`.onnx`: the one ONNX Runtime session factory.
* :mod:`.safe_files`: files that stay inside their folder (inputs inside
  their root, output files through ``O_EXCL | O_NOFOLLOW`` temporaries and
  a rename, output folders without symlinks leading out).
* :mod:`.json_limits`: JSON read within documented depth and number limits.

Any module of ``agl_fast`` may import from here; nothing outside the package
should.
"""
