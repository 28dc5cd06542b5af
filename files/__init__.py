"""Attachments: what members share becomes model input (detection, images, PDFs, preparation), and what the model's
history keeps of it. Nothing here imports discord: the bot hands over `AttachmentInfo`s and a reader of their bytes."""
