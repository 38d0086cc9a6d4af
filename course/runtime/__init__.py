"""What a student's code imports: messages, clock, abort signals, model streams, the scripted model, tools, providers."""
