"""A small CPU training loop of the kind users write: a DataLoader without workers whose
per-sample augmentation (numpy) costs more than the model's step.

    python3 train_loader.py [EPOCHS] [SIZE] [PASSES]

SIZE x SIZE images (default 32) and PASSES blur passes (default 6) set how heavy the
augmentation is against the model's step (64 and 10: the loading is most of the step).
"""

import sys

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


class Augmented(Dataset):
    """Image-like samples, jittered, blurred and normalised one by one in numpy."""

    def __init__(self, n=512, size=32, passes=6):
        rng = np.random.default_rng(0)
        self.raw = rng.standard_normal((n, 3, size, size)).astype(np.float32)
        self.passes = passes
        self.labels = rng.integers(0, 10, n)

    def __len__(self):
        return len(self.raw)

    def __getitem__(self, i):
        x = self.raw[i]
        for _ in range(self.passes):  # a few passes of a cheap blur, as an augmentation would
            x = (x + np.roll(x, 1, axis=1) + np.roll(x, 1, axis=2)) / 3.0
        x = (x - x.mean()) / (x.std() + 1e-6)
        return torch.from_numpy(x.astype(np.float32)), int(self.labels[i])


def main(epochs=2, size=32, passes=6):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * size * size, 256),
                                torch.nn.ReLU(), torch.nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Augmented(size=size, passes=passes), batch_size=32, shuffle=True,
                        num_workers=0)
    for epoch in range(epochs):
        total = 0.0
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
        print(f"epoch {epoch}: loss {total / len(loader):.3f}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:4]))
