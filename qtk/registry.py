"""Name -> class registries, so a QConfig or a config file can name a user's own quantizer."""


class Registry:
    """A named collection of classes of one kind (observers, fake quantizers).

    Args:
        kind: what the registry holds, for error messages ("observer").
    """

    def __init__(self, kind):
        self.kind = kind
        self._classes = {}

    def register(self, name, cls):
        """Make ``cls`` available under ``name``; a different class may not take a used name."""
        if name in self._classes and self._classes[name] is not cls:
            raise ValueError(f"an {self.kind} named {name!r} is already registered "
                             f"({self._classes[name].__qualname__})")
        self._classes[name] = cls
        return cls

    def get(self, name):
        try:
            return self._classes[name]
        except KeyError:
            raise KeyError(f"no {self.kind} named {name!r}; registered: {sorted(self._classes)}") \
                from None
