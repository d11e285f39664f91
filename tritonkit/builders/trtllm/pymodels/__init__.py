"""Python-backend model sources the TensorRT-LLM builder copies into a repository.

Each file here becomes a ``model.py`` (or sits beside one) inside a version folder and runs in
the server's python backend, so it imports only numpy, ``tokenizers`` and the backend's own
``triton_python_backend_utils`` — never tritonkit.
"""
