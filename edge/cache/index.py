"""The vector index inside sqlite-vec: an inverted file (IVF) over binary codes, re-ranked in float.

sqlite-vec 0.1.9 only scans, so a lookup scans the sign codes of the ``nprobe`` buckets (k-means
centroids) nearest the query, in the tenant's partition only, and re-ranks the nearest by exact
cosine (docs/cache.md, "Vector search at scale").
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from ..errors import CacheError

DIM = 384
CODE_BYTES = DIM // 8
SHIPPED = "index.npz"


@dataclass(frozen=True)
class IvfIndex:
    """Centroids (n x 384, unit rows) and the mean subtracted before taking sign bits."""

    centroids: np.ndarray
    mean: np.ndarray

    @classmethod
    def shipped(cls) -> IvfIndex:
        path = resources.files("edge.cache") / "data" / SHIPPED
        try:
            with resources.as_file(path) as real, np.load(Path(real)) as data:
                return cls.from_arrays(data["centroids"], data["mean"])
        except (OSError, KeyError, ValueError) as exc:
            raise CacheError(f"cannot read the shipped vector index {path}: {exc}") from exc

    @classmethod
    def from_arrays(cls, centroids: np.ndarray, mean: np.ndarray) -> IvfIndex:
        c = np.asarray(centroids, dtype=np.float32)
        c = c / np.maximum(np.linalg.norm(c, axis=1, keepdims=True), 1e-12)
        return cls(np.ascontiguousarray(c), np.asarray(mean, dtype=np.float32).reshape(DIM))

    def blobs(self) -> tuple[bytes, bytes]:
        return self.centroids.astype(np.float32).tobytes(), self.mean.astype(np.float32).tobytes()

    def buckets(self, vecs: np.ndarray) -> np.ndarray:
        """The bucket of each row of ``vecs``."""
        return np.argmax(np.atleast_2d(vecs) @ self.centroids.T, axis=1)

    def probes(self, vec: np.ndarray, nprobe: int) -> list[int]:
        """The ``nprobe`` buckets nearest ``vec``, nearest first."""
        scores = self.centroids @ vec
        n = min(nprobe, scores.shape[0])
        top = np.argpartition(-scores, n - 1)[:n]
        return [int(b) for b in top[np.argsort(-scores[top])]]

    def codes(self, vecs: np.ndarray) -> np.ndarray:
        """384-bit sign codes of the centred vectors, 48 bytes a row."""
        return np.packbits(np.atleast_2d(vecs) - self.mean > 0, axis=1)


def train_index(vecs: np.ndarray, n_buckets: int = 256, seed: int = 0) -> IvfIndex:
    """k-means centroids (spherical: on unit vectors) and the mean of a sample of embeddings."""
    from sklearn.cluster import MiniBatchKMeans

    x = np.asarray(vecs, dtype=np.float32)
    km = MiniBatchKMeans(n_clusters=n_buckets, random_state=seed, batch_size=4096, n_init=3, max_iter=100)
    km.fit(x)
    return IvfIndex.from_arrays(km.cluster_centers_, x.mean(axis=0))


def save_index(index: IvfIndex, path: Path) -> None:
    np.savez_compressed(path, centroids=index.centroids.astype(np.float16), mean=index.mean.astype(np.float16))
