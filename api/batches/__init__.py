"""OpenAI's Files and Batches API for decision lines: uploads, batches, and the tasks that answer their lines
through the installed wire formats (the stored records live in the `batches` app)."""
