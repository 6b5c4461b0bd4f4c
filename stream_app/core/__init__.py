"""The pure core: no Kafka, no Faust, no clock of its own.

``intake.decode`` turns one source record into a session-keyed input or a dead letter;
``assembler.apply`` folds that input into one session's state and says what to emit;
``expiry.expire`` bounds the state. Everything that drives the pipeline drives these.
"""
