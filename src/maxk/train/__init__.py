"""Training stage: the embedded base model (``maxk base``) and GRPO with pluggable advantages
(``maxk train``).

Modules: ``grpo`` (the TRL subclass, torch-heavy), ``base`` (tokenizer/model builder and SFT),
``run`` (one named run: dataset, reward, checkpoints, metrics CSV), ``launch`` (paper-scale command
construction, no heavy imports) and ``cli`` (cheap registration).
"""
