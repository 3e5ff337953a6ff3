"""What every record shares: its JSON field names kept as they are written
(unknown fields of older or newer records kept too), and its JSON form."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class Record(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    def as_json(self) -> dict[str, Any]:
        """The record as results/*.json holds it: the JSON field names, `schema` among them."""
        return self.model_dump(mode="json", by_alias=True)
